-- 0009_quotas: a rolling budget of device-hours per user (issue 13; the rules
-- are in docs/API-EXTENSIONS.md, "Quotas and rate limits").
--
-- An attempt's device-seconds are counted in the hour it stops running (by the
-- same trigger that folds the fair-share usage), in usage_hours.  A user's
-- usage is the sum of the hours that started less than 24 hours ago.  A user
-- with users.quota_hours whose usage reaches it is held: held_until is the
-- moment enough of the oldest hours leave the window to bring the usage below
-- the quota.  Until then the claim passes over the user's queued jobs and the
-- server refuses its submits (429 quota_exceeded, Retry-After); jobs already
-- running finish.  Nothing is dropped: the held jobs start by themselves.

ALTER TABLE users
    ADD COLUMN quota_hours double precision CHECK (quota_hours IS NULL OR quota_hours > 0),
    ADD COLUMN held_until timestamptz;

-- Sharded by the worker's name like user_usage (0007), so workers finishing a
-- user's jobs at once do not queue for one row.  Rows older than the window
-- are deleted by the trigger when it opens a new hour.
CREATE TABLE usage_hours (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    hour    timestamptz NOT NULL,
    shard   smallint NOT NULL,
    seconds double precision NOT NULL,
    PRIMARY KEY (user_id, hour, shard)
);

CREATE FUNCTION fb_quota_window() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$SELECT interval '24 hours'$$;

-- The user's device-seconds in the window now.
CREATE FUNCTION fb_quota_used(p_user bigint) RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(sum(seconds), 0) FROM usage_hours
     WHERE user_id = p_user AND hour > now() - fb_quota_window()
$$;

-- When a user with quota p_hours, over it now, is under it again: the end of
-- the window of the oldest hour whose leaving is enough.  NULL when under it.
CREATE FUNCTION fb_quota_release(p_user bigint, p_hours double precision) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    WITH h AS (SELECT hour, sum(seconds) AS s FROM usage_hours
                WHERE user_id = p_user AND hour > now() - fb_quota_window()
                GROUP BY hour),
         c AS (SELECT hour, sum(s) OVER (ORDER BY hour) AS gone, sum(s) OVER () AS total FROM h)
    SELECT min(hour) + fb_quota_window() FROM c
     WHERE p_hours IS NOT NULL AND total >= p_hours * 3600 AND total - gone < p_hours * 3600
$$;

CREATE OR REPLACE FUNCTION fb_usage_fold() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_secs  double precision := GREATEST(0, EXTRACT(EPOCH FROM now() - OLD.started_at));
    v_shard smallint := abs(hashtext(COALESCE(OLD.worker, ''))) % 16;
    v_fresh boolean;
    v_quota double precision;
BEGIN
    INSERT INTO user_usage AS u (user_id, shard, usage, at)
    VALUES (NEW.owner_id, v_shard, v_secs, now())
    ON CONFLICT (user_id, shard) DO UPDATE SET
        usage = u.usage * power(0.5, EXTRACT(EPOCH FROM now() - u.at) / fb_usage_half_life())
                + EXCLUDED.usage,
        at = now();
    INSERT INTO usage_hours AS h (user_id, hour, shard, seconds)
    VALUES (NEW.owner_id, date_trunc('hour', now()), v_shard, v_secs)
    ON CONFLICT (user_id, hour, shard) DO UPDATE SET seconds = h.seconds + EXCLUDED.seconds
    RETURNING h.xmax = 0 INTO v_fresh;
    IF v_fresh THEN -- a new hour for this shard: the ones past the window go
        DELETE FROM usage_hours
         WHERE user_id = NEW.owner_id AND shard = v_shard
           AND hour <= now() - fb_quota_window() - interval '1 hour';
    END IF;
    SELECT quota_hours INTO v_quota FROM users WHERE id = NEW.owner_id;
    IF v_quota IS NOT NULL THEN
        UPDATE users SET held_until = r.at
          FROM (SELECT fb_quota_release(NEW.owner_id, v_quota) AS at) r
         WHERE id = NEW.owner_id AND r.at IS NOT NULL
           AND held_until IS DISTINCT FROM r.at;
    END IF;
    RETURN NULL;
END
$$;

-- As 0007 and 0008, and an owner held by its quota is passed over.
CREATE OR REPLACE FUNCTION fb_claim_pick(p_engines text[], p_device text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = on
-- enable_seqscan = off makes the estimate of the tiny workers scan huge, and a
-- huge estimate starts the JIT compiler: 100 ms a claim.
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    picked  bigint;
    owners  bigint[];
    o       record;
    waiting integer;
    live    integer;
    cap     integer;
    key     bigint;
BEGIN
    -- The owners with queued jobs here, one index probe each.
    owners := ARRAY(
        WITH RECURSIVE r(owner) AS (
            (SELECT COALESCE(owner_id, 0) FROM jobs
              WHERE state = 'queued' AND device = p_device
              ORDER BY device, COALESCE(owner_id, 0) LIMIT 1)
            UNION ALL
            SELECT (SELECT COALESCE(j.owner_id, 0) FROM jobs j
                     WHERE j.state = 'queued' AND j.device = p_device
                       AND COALESCE(j.owner_id, 0) > r.owner
                     ORDER BY j.device, COALESCE(j.owner_id, 0) LIMIT 1)
              FROM r WHERE r.owner IS NOT NULL)
        SELECT owner FROM r WHERE owner IS NOT NULL);
    waiting := cardinality(owners);
    IF waiting = 0 THEN
        RETURN NULL;
    END IF;
    IF waiting = 1 AND owners[1] = 0 THEN -- only owner-less jobs: the plain order
        SELECT id INTO picked FROM jobs
         WHERE state = 'queued' AND device = p_device
           AND COALESCE(owner_id, 0) = owners[1]
           AND engine = ANY (p_engines) AND not_before <= now()
         ORDER BY device, COALESCE(owner_id, 0), priority DESC, id
         LIMIT 1
           FOR UPDATE SKIP LOCKED;
        RETURN picked;
    END IF;
    SELECT count(*) INTO live FROM workers
     WHERE device ->> 'kind' = p_device AND state <> 'stopped'
       AND last_heartbeat >= now() - interval '60 seconds';
    -- Two passes over the owners, least usage first.  The first only tries each
    -- owner's lock, so concurrent claims spread over the owners instead of
    -- queueing behind the least used; the second waits for them in turn.
    FOR pass IN 1..2 LOOP
        FOR o IN
            SELECT w.owner, u.max_running, u.held_until,
                   COALESCE((SELECT sum(uu.usage * power(0.5, EXTRACT(EPOCH FROM now() - uu.at)
                                                          / fb_usage_half_life()))
                               FROM user_usage uu WHERE uu.user_id = w.owner), 0)
                   + COALESCE((SELECT sum(EXTRACT(EPOCH FROM now() - j.started_at)) FROM jobs j
                                WHERE j.state = 'running' AND j.owner_id = w.owner), 0) AS usage
              FROM unnest(owners) w(owner) LEFT JOIN users u ON u.id = w.owner
             ORDER BY usage, w.owner
        LOOP
            -- An owner over its quota waits until the window has room again.
            CONTINUE WHEN o.held_until > now();
            -- users.max_running always; the share only while others wait.
            cap := CASE WHEN o.owner = 0 THEN NULL
                        ELSE COALESCE(o.max_running, CASE WHEN waiting > 1 THEN
                                      GREATEST(1, ceil(live::numeric / waiting)::integer) END)
                   END;
            key := hashtextextended('fusionbench-owner:' || o.owner, 0);
            IF cap IS NOT NULL THEN
                -- The share is checked under the owner's lock, so concurrent
                -- claims for one owner cannot both pass it (a plain NOT EXISTS
                -- would race).  A session-level lock, let go of unless this claim
                -- takes a job: a claim never waits while it holds one, so no two
                -- claims deadlock.
                IF pass = 1 THEN
                    CONTINUE WHEN NOT pg_try_advisory_lock(key);
                ELSE
                    PERFORM pg_advisory_lock(key);
                END IF;
                IF (SELECT count(*) FROM jobs WHERE state = 'running' AND owner_id = o.owner)
                   >= cap THEN
                    PERFORM pg_advisory_unlock(key);
                    CONTINUE;
                END IF;
            END IF;
            SELECT id INTO picked FROM jobs
             WHERE state = 'queued' AND device = p_device
               AND COALESCE(owner_id, 0) = o.owner
               AND engine = ANY (p_engines) AND not_before <= now()
             ORDER BY device, COALESCE(owner_id, 0), priority DESC, id
             LIMIT 1
               FOR UPDATE SKIP LOCKED;
            IF cap IS NOT NULL THEN
                -- Taking a job: hold the owner until this claim commits (the
                -- claim's UPDATE makes the job running), then let the session go.
                IF picked IS NOT NULL THEN
                    PERFORM pg_advisory_xact_lock(key);
                END IF;
                PERFORM pg_advisory_unlock(key);
            END IF;
            IF picked IS NOT NULL THEN
                RETURN picked;
            END IF;
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$;
