# seed-example: examples.md line 1720 (Launch from YAML File)
import sky

# Load task from a YAML file
task = sky.Task.from_yaml('train.yaml')

# Launch with options
request_id = sky.launch(
    task,
    cluster_name='train-cluster',
    idle_minutes_to_autostop=30, # Auto-stop after 30 min idle
    retry_until_up=True, # Keep trying if resources unavailable
)
result = sky.get(request_id)
