# seed-example: examples.md line 1738 (Check Status and Get Cluster Info)
import sky

# Get all cluster statuses
request_id = sky.status()
clusters = sky.get(request_id)

for cluster in clusters:
    print(f"Cluster: {cluster['name']}")
    print(f" Status: {cluster['status']}")
    print(f" Resources: {cluster['resources_str']}")
    print(f" Autostop: {cluster['autostop']} min")

# Get status for a specific cluster
request_id = sky.status(cluster_names=['my-cluster'])
clusters = sky.get(request_id)

# Get job queue for a cluster
request_id = sky.queue('my-cluster')
jobs = sky.get(request_id)
for job in jobs:
    print(f"Job {job['job_id']}: {job['status']}")
