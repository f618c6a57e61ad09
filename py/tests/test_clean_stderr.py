"""A Python process that imports kiln and computes prints nothing on stderr (issue 34).

Every process used to print "error: XDG_RUNTIME_DIR is invalid or not set in the environment."
twice: wgpu enabled VK_KHR_wayland_surface and Mesa's device-select layer then probed Wayland
(core/src/instance.rs). The child runs as a server or CI job would: no XDG_RUNTIME_DIR,
WAYLAND_DISPLAY or DISPLAY.
"""

import os
import subprocess
import sys

CHILD = """
import numpy as np, kiln
a = kiln.asarray(np.array([[1, 2], [3, 4]], dtype=np.float32))
assert ((a @ a).numpy() == np.array([[7, 10], [15, 22]], dtype=np.float32)).all()
print("ok")
"""


def test_import_and_compute_print_nothing_on_stderr():
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "DISPLAY")}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert out.stderr == ""
