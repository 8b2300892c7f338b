"""train.py of train.yaml (the seed examples launch train.yaml with this
folder as the workdir)."""
import os
import sys

print('train.py: training with', ' '.join(sys.argv[1:]) or 'defaults',
      'on node rank', os.environ.get('SKYPILOT_NODE_RANK'))
print('train.py: done')
