"""A job's life, with no process around it: the payload (``payload``), the registry of job
names (``registry``), the two middleware chains (``middleware``), the lifecycle hooks
(``hooks``), process records and the beat (``heartbeat``), one identity's in-progress list
(``inprogress``), and the one place a job's fate is decided (``fate.decide``) and written
(``settlement.apply``). Nothing here imports a process, the client or the ``@job`` decorator."""
