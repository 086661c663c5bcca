import sys
from pathlib import Path

# tests/helpers.py holds the shared builders; make it importable as `helpers`.
sys.path.insert(0, str(Path(__file__).parent))
