"""train.py for the seed examples' tasks that have no workdir: says what it
was asked to do."""
import sys

print('train.py (seed-example fixture):', ' '.join(sys.argv[1:]))
