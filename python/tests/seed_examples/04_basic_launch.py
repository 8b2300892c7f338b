# seed-example: examples.md line 1698 (Basic: Create Task, Set Resources, Launch)
# seed-example: rewritten: accelerators A100:1 dropped: the local infrastructure has no accelerators (a local node is this machine's CPUs)
import sky

# Create a task programmatically
task = sky.Task(
    name='hello-gpu',
    run='nvidia-smi && python -c "import torch; print(torch.cuda.device_count())"',
)
task.set_resources(sky.Resources(
))

# Launch returns a request ID (async by default)
request_id = sky.launch(task, cluster_name='my-cluster')

# Wait for the launch to complete
job_id, handle = sky.get(request_id)
print(f'Job ID: {job_id}')
