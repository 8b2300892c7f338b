# seed-example: python-sdk.md line 527 (sky.endpoints)
import sky
request_id = sky.endpoints('test-cluster')
sky.get(request_id)
