"""The net probe's unit: NICs joined to their nearest GPUs (`_nic_gpus`) and the HTML page's
network section."""
