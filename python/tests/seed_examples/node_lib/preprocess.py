"""preprocess.py for the seed examples' DAG: says what it was asked to do
(it writes nothing: a local node's /tmp is this machine's)."""
import sys

print('preprocess.py (seed-example fixture):', ' '.join(sys.argv[1:]))
