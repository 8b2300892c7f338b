# seed-example: examples.md line 1885 (Autostop Management)
import sky

# Set autostop: stop after 30 minutes of idleness
request_id = sky.autostop(
    cluster_name='my-cluster',
    idle_minutes=30,
)
sky.get(request_id)

# Set autodown: tear down (not just stop) after 60 minutes idle
request_id = sky.autostop(
    cluster_name='my-cluster',
    idle_minutes=60,
    down=True,
)
sky.get(request_id)

# Cancel autostop
request_id = sky.autostop(
    cluster_name='my-cluster',
    idle_minutes=-1, # Negative value cancels autostop
)
sky.get(request_id)

# Stop and start a cluster
sky.get(sky.stop('my-cluster'))
sky.get(sky.start('my-cluster'))

# Tear down a cluster
sky.get(sky.down('my-cluster'))
