"""Hunt: search a domain of inputs for the ones on which two paths disagree most, before the model ships.

``hunt_case`` (``jaxparity hunt``) states the domain (``domain``), finds the model's hazard sites
(``hazards``, ``probe``), searches (``search``), ranks what it finds (``score``) and returns a
``HuntResult`` (``result``), rendered by ``report``.
"""

from .result import Finding as Finding, HuntResult as HuntResult, HuntSite as HuntSite
from .run import Hunt as Hunt, hunt_case as hunt_case

__all__ = ["Finding", "Hunt", "HuntResult", "HuntSite", "hunt_case"]
