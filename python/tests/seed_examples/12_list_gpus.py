# seed-example: examples.md line 1920 (List GPUs Programmatically)
# seed-example: indentation restored (the seed flattens nesting to one space)
import sky

# List all available accelerators
request_id = sky.list_accelerators(
    gpus_only=True,
    name_filter='A100',
)
accelerators = sky.get(request_id)

for acc_name, offerings in accelerators.items():
    print(f'\n{acc_name}:')
    for offering in offerings:
        print(f' {offering}')

# List accelerator counts (how many GPUs per node)
request_id = sky.list_accelerator_counts(
    gpus_only=True,
    name_filter='H100',
)
counts = sky.get(request_id)
for acc_name, available_counts in counts.items():
    print(f'{acc_name}: available in counts {available_counts}')

# Check which clouds are enabled
request_id = sky.enabled_clouds()
clouds = sky.get(request_id)
print(f'Enabled clouds: {clouds}')
