"""The probes' units: each probe's controller-side knowledge in one package, fleet/units/PROBE/,
one module per role (its parts: fleet/registry/__init__.py lists them). The registry
(fleet.registry) names them and loads each part when a stage first asks for it; nothing below the
units imports them (docs/layers.md)."""
