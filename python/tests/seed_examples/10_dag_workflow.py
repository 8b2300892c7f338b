# seed-example: examples.md line 1854 (DAG Workflow (Task Dependencies))
# seed-example: rewritten: cpus 8+ / memory 32+ -> 1+ / 1+: a local node has this machine's CPUs and memory (2 cores on CI)
# seed-example: rewritten: accelerators A100:4 dropped: the local infrastructure has no accelerators (a local node is this machine's CPUs)
import sky

# Create a DAG with task dependencies
with sky.Dag() as dag:
    # Step 1: Data preprocessing
    preprocess = sky.Task(
        name='preprocess',
        setup='pip install pandas pyarrow',
        run='python preprocess.py --output /tmp/data',
    )
    preprocess.set_resources(sky.Resources(cpus='1+', memory='1+'))

    # Step 2: Training (depends on preprocessing)
    train = sky.Task(
        name='train',
        setup='pip install torch transformers',
        run='python train.py --data /tmp/data',
    )
    train.set_resources(sky.Resources())

    # Define dependency: preprocess must finish before train
    preprocess >> train

# Launch the DAG (experimental)
request_id = sky.launch(dag, cluster_name='pipeline')
sky.get(request_id)
