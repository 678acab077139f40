-- 0007_fair_share: a fair share of the workers, in the claim itself (issue 13;
-- the dispatch order is documented in docs/API-EXTENSIONS.md).
--
-- Among the owners with a claimable job for the worker's device, the claim
-- prefers the one with the least recent usage: device-seconds of its finished
-- attempts, halved every hour (Slurm's multifactor idea), plus the seconds its
-- running jobs have run so far.  Within an owner: priority, then age.  An owner
-- already running its share of the live workers of that device (the live
-- workers divided by the owners waiting, rounded up) is passed over while
-- others wait; users.max_running, when set, caps a user at all times.  Jobs without an owner (submitted
-- with authentication off) form one owner of their own, with no usage.

ALTER TABLE users ADD COLUMN max_running integer CHECK (max_running IS NULL OR max_running >= 1);

-- Decayed device-seconds per user, folded in when an attempt stops running;
-- spread over 16 rows per user by the worker's name, so workers finishing jobs
-- of one user at once do not queue for one row lock.
CREATE TABLE user_usage (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    shard   smallint NOT NULL,
    usage   double precision NOT NULL DEFAULT 0,
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, shard)
);

-- Usage halves every fb_usage_half_life() seconds.
CREATE FUNCTION fb_usage_half_life() RETURNS double precision
LANGUAGE sql IMMUTABLE AS 'SELECT 3600.0::double precision';

CREATE FUNCTION fb_usage_fold() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_usage AS u (user_id, shard, usage, at)
    VALUES (NEW.owner_id, abs(hashtext(COALESCE(OLD.worker, ''))) % 16,
            GREATEST(0, EXTRACT(EPOCH FROM now() - OLD.started_at)), now())
    ON CONFLICT (user_id, shard) DO UPDATE SET
        usage = u.usage * power(0.5, EXTRACT(EPOCH FROM now() - u.at) / fb_usage_half_life())
                + EXCLUDED.usage,
        at = now();
    RETURN NULL;
END
$$;

-- Every way out of 'running' (complete, fail, release, cancel, rescue) passes
-- here; jobs without an owner cost nothing.
CREATE TRIGGER jobs_usage AFTER UPDATE OF state ON jobs
FOR EACH ROW
WHEN (OLD.state = 'running' AND NEW.state <> 'running' AND NEW.owner_id IS NOT NULL
      AND OLD.started_at IS NOT NULL)
EXECUTE FUNCTION fb_usage_fold();

-- The owners with queued jobs on a device, found by a skip scan of this index
-- (one probe per owner, not per job), and each owner's next job in claim order.
-- It replaces 0001's jobs_claim_idx, which no claim reads any more.
CREATE INDEX jobs_claim_owner_idx ON jobs (device, (COALESCE(owner_id, 0)), priority DESC, id)
    WHERE state = 'queued';
DROP INDEX jobs_claim_idx;

CREATE OR REPLACE FUNCTION fb_claim_pick(p_engines text[], p_device text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = on
-- enable_seqscan = off makes the estimate of the tiny workers scan huge, and a
-- huge estimate starts the JIT compiler: 100 ms a claim.
SET jit = off
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
            SELECT w.owner, u.max_running,
                   COALESCE((SELECT sum(uu.usage * power(0.5, EXTRACT(EPOCH FROM now() - uu.at)
                                                          / fb_usage_half_life()))
                               FROM user_usage uu WHERE uu.user_id = w.owner), 0)
                   + COALESCE((SELECT sum(EXTRACT(EPOCH FROM now() - j.started_at)) FROM jobs j
                                WHERE j.state = 'running' AND j.owner_id = w.owner), 0) AS usage
              FROM unnest(owners) w(owner) LEFT JOIN users u ON u.id = w.owner
             ORDER BY usage, w.owner
        LOOP
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
