"""The client half of the SkyGo SDK: transport (endpoint, auth, waiting,
streaming) and the SDK functions."""
