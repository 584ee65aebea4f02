"""The built-in transforms, as developed: the repository's top-level `transforms/` folder.

An installed wheel carries that folder here, as this package (this file is left out of the
wheel); an editable install reads it where it lies, so an edit there is live.
"""

import os

__path__ = [os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "transforms")]
