-- 0011_models: the models people bring themselves (issue 26): an uploaded
-- archive (a torch.export .pt2), stored once by content in PostgreSQL, the
-- one store every worker already reaches.
--
-- An archive's bytes are 1 MiB chunks of one blob, uncompressed (weights do
-- not compress, and compressing them costs the upload's time).  The blob's
-- SHA-256 is NULL only inside the uploading transaction, which sets it at
-- the end; the same bytes uploaded again end up as the existing blob (the
-- upload's chunks are rolled back to a savepoint).  A blob goes when the last
-- model naming it does.
CREATE TABLE model_blobs (
    id         bigserial PRIMARY KEY,
    sha256     bytea UNIQUE CHECK (sha256 IS NULL OR length(sha256) = 32),
    size       bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE model_chunks (
    blob_id bigint NOT NULL REFERENCES model_blobs (id) ON DELETE CASCADE,
    seq     integer NOT NULL CHECK (seq >= 0),
    data    bytea NOT NULL,
    PRIMARY KEY (blob_id, seq)
);
ALTER TABLE model_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- A model: its owner (NULL when the server runs without authentication),
-- a name unique per owner, who else sees it, its archive, and what preparing
-- it found (status, error, info: inputs, parameters, ops, the native
-- engine's conversion).
CREATE TABLE models (
    id         bigserial PRIMARY KEY,
    owner_id   bigint REFERENCES users (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    visibility text NOT NULL CHECK (visibility IN ('private', 'lab')),
    blob_id    bigint NOT NULL REFERENCES model_blobs (id),
    format     text NOT NULL DEFAULT 'torch.export',
    status     text NOT NULL DEFAULT 'preparing'
               CHECK (status IN ('preparing', 'ready', 'invalid')),
    error      text CHECK (length(error) <= 2000),
    info       jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX models_owner_name ON models (COALESCE(owner_id, 0), name);
CREATE INDEX models_blob_idx ON models (blob_id);

-- A user's storage quota in bytes (NULL: the server's --model-quota).  What
-- counts is each distinct archive of the user's models once.
ALTER TABLE users
    ADD COLUMN model_quota_bytes bigint CHECK (model_quota_bytes IS NULL OR model_quota_bytes >= 0);

CREATE FUNCTION fb_model_usage(p_owner bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(sum(b.size), 0)::bigint FROM model_blobs b
     WHERE b.id IN (SELECT blob_id FROM models WHERE COALESCE(owner_id, 0) = p_owner)
$$;
