# seed-example: examples.md line 1764 (Batch Submission (Launch Multiple Tasks))
# seed-example: rewritten: accelerators A100:1 dropped: the local infrastructure has no accelerators (a local node is this machine's CPUs)
import sky

# Launch multiple training runs with different configs
configs = [
    {'lr': 1e-3, 'batch_size': 32},
    {'lr': 1e-4, 'batch_size': 64},
    {'lr': 1e-5, 'batch_size': 128},
]

request_ids = []
for i, cfg in enumerate(configs):
    task = sky.Task(
        name=f'sweep-{i}',
        setup='pip install torch transformers',
        run=f'python train.py --lr {cfg["lr"]} --batch-size {cfg["batch_size"]}',
    )
    task.set_resources(sky.Resources())

    request_id = sky.launch(
        task,
        cluster_name=f'sweep-{i}',
        idle_minutes_to_autostop=10,
        down=True, # Auto-teardown after idle
    )
    request_ids.append(request_id)
    print(f'Launched sweep-{i}: {request_id}')

# Wait for all to complete
for rid in request_ids:
    result = sky.get(rid)
    print(f'Completed: {rid}')
