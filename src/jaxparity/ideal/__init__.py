"""What the f64 ideal can know of the program the user meant: constants the program holds rounded at trace
time (``constants``), and the short values they plausibly stand for (``short``)."""

from .constants import Site as Site, ideal_uncertainty as ideal_uncertainty, rounded_sites as rounded_sites
from .short import ShortValue as ShortValue, rounding_interval as rounding_interval, short_value as short_value
