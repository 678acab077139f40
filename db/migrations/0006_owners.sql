-- 0006_owners: jobs and suites carry the user who submitted them (issue 13).
-- NULL: submitted with authentication off (the embedded default), or by a user
-- since deleted.  Lists filter by owner (owner=me) with the index below.
ALTER TABLE jobs ADD COLUMN owner_id bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE suites ADD COLUMN owner_id bigint REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX jobs_owner_list_idx ON jobs (owner_id, id DESC) WHERE owner_id IS NOT NULL;
