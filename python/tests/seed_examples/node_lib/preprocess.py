"""preprocess.py for the seed examples' DAG: makes the --output folder."""
import os
import sys

args = sys.argv[1:]
out = args[args.index('--output') + 1] if '--output' in args else 'data'
os.makedirs(out, exist_ok=True)
print('preprocess.py (seed-example fixture): wrote', out)
