# lit configuration of the golden tests: `.tir` files whose RUN lines pipe tilec-opt into filecheck.
# Run with `lit tests/filecheck` (the venv's bin on PATH) or through tests/test_filecheck.py.
import os
import sys
import tempfile

import lit.formats

config.name = "tilec"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tir"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
# outputs (%t files, test times) go to a scratch directory, never into the source tree
config.test_exec_root = os.path.join(tempfile.gettempdir(), f"tilec-lit-{os.getuid()}")

venv_bin = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([venv_bin, os.environ.get("PATH", "")])
config.environment["PYTHONPATH"] = os.path.dirname(os.path.dirname(config.test_source_root))

# print -> parse -> print must be the identity (docs/STYLE.md #3); %t.1/%t.2 hold the two prints
config.substitutions.append(
    ("%ROUNDTRIP", "tilec-opt --split-input-file %s > %t.1 && tilec-opt --split-input-file %t.1 > %t.2 && diff %t.1 %t.2")
)
