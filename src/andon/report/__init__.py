"""What people read: the status board and the evidence of one packet.

Reads the store only; never recomputes a verdict. ``board`` draws the board, ``evidence``
one packet's evidence, ``figures`` the numbers both show; see README.md.
"""

from .board import board, status_rows
from .evidence import packet_detail, show_packet
from .figures import accounting_text, run_accounting, usage_of, usage_of_rows, usage_text

__all__ = ["accounting_text", "board", "packet_detail", "run_accounting", "show_packet",
           "status_rows", "usage_of", "usage_of_rows", "usage_text"]
