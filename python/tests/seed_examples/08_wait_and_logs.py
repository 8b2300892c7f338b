# seed-example: examples.md line 1800 (Wait for Completion and Get Results)
import sky

# Launch a task
task = sky.Task.from_yaml('train.yaml')
request_id = sky.launch(task, cluster_name='train')

# stream_and_get streams logs AND waits for completion
result = sky.stream_and_get(request_id)

# Check job status
request_id = sky.job_status('train', job_ids=[1])
statuses = sky.get(request_id)
print(f'Job 1 status: {statuses[1]}')

# Tail logs (blocking, streams to console)
exit_code = sky.tail_logs('train', job_id=1, follow=True)
print(f'Job exit code: {exit_code}')
