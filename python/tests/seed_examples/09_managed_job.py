# seed-example: examples.md line 1822 (Programmatic Managed Job Launch)
# seed-example: rewritten: accelerators A100:4 dropped: the local infrastructure has no accelerators (a local node is this machine's CPUs); use_spot dropped: the local infrastructure has no spot instances (its optimizer refuses use_spot)
import sky

# Create a managed job task
task = sky.Task(
    name='managed-training',
    setup='pip install torch transformers',
    run='python train.py --resume',
)
task.set_resources(sky.Resources(
    job_recovery={
        'strategy': 'EAGER_NEXT_REGION',
        'max_restarts_on_errors': 3,
    },
))

# Launch as a managed job
request_id = sky.jobs.launch(task)
job_id = sky.get(request_id)
print(f'Managed job ID: {job_id}')

# Check managed job queue
request_id = sky.jobs.queue()
jobs = sky.get(request_id)
for job in jobs:
    print(f"Job {job['job_id']}: {job['job_name']} - {job['status']}")
