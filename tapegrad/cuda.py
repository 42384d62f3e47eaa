"""``tapegrad.cuda``: what code written for PyTorch asks before it moves to a GPU.
tapegrad runs on the CPU only: no device is ever available."""


def is_available():
    return False


def device_count():
    return 0
