-- 0010_idempotency: Idempotency-Key on POST /api/v1/jobs and /suites (issue
-- 15; docs/API-EXTENSIONS.md, "Idempotent submits").
--
-- A submit that carries a key keeps it, with the SHA-256 (hex) of its request
-- body, on the job or suite it made, for as long as that exists (jobs and
-- suites are never removed by the service itself, so at least 24 hours).  One
-- key per owner (0: a server without tokens): the unique indexes below make a
-- concurrent retry wait for the first insert and then find its row, never
-- insert a second.

ALTER TABLE jobs ADD COLUMN idem_key text, ADD COLUMN idem_hash text;
ALTER TABLE suites ADD COLUMN idem_key text, ADD COLUMN idem_hash text;

CREATE UNIQUE INDEX jobs_idem_key ON jobs ((COALESCE(owner_id, 0)), idem_key)
    WHERE idem_key IS NOT NULL;
CREATE UNIQUE INDEX suites_idem_key ON suites ((COALESCE(owner_id, 0)), idem_key)
    WHERE idem_key IS NOT NULL;
