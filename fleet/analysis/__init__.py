"""Pure functions over runs: `facts` (probe data → addressable facts), `across_hosts` (diff),
`across_runs` (drift, bands), `baselines`. What one probe alone knows lives in its unit
(fleet/units/PROBE/facts.py). Nothing here touches the network or the terminal."""
