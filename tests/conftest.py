import sys
from pathlib import Path

# tests import their helper modules (reference_maths) by name
sys.path.insert(0, str(Path(__file__).parent))
