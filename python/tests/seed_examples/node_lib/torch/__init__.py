"""torch on a seed example's node: only what the examples call, for a
CPU-only local node."""


class cuda:  # noqa: N801 - torch's own name
    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def is_available():
        return False
