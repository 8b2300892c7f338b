# seed-example: python-sdk.md line 8 (SkyPilot Python SDK Reference)
import sky

request_id = sky.launch(sky.Task.from_yaml("task.yaml"))
result = sky.get(request_id)
