"""`graphfix demo`: placeholder replaced below."""


def run_demo() -> int:
    return 0
