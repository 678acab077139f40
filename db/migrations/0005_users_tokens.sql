-- 0005_users_tokens: who may use the API (issue 13).
--
-- Users have one role: viewer (reads everything), user (submits; manages what
-- they own), admin (everything).  API tokens are opaque strings shown once at
-- creation ("fbu_<key id>_<secret>"); only a SHA-256 digest of the whole token
-- is kept.  The key id, the token's public part, finds the row; the digest is
-- then compared in constant time (server/srv_token.c).  A fast hash is right
-- for tokens of 190 random bits; a password KDF per request would not be.
CREATE TABLE users (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9._-]{0,62}$'),
    role       text NOT NULL CHECK (role IN ('viewer', 'user', 'admin')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tokens (
    id           bigserial PRIMARY KEY,
    key_id       text NOT NULL UNIQUE CHECK (key_id ~ '^[A-Za-z0-9]{12}$'),
    digest       bytea NOT NULL CHECK (length(digest) = 32),
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '' CHECK (length(name) <= 100),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX tokens_user_idx ON tokens (user_id);
