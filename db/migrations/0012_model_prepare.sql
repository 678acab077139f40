-- 0012_model_prepare: preparing an uploaded model is a task the workers with
-- the inductor engine claim from the models table itself, leased like a job
-- (issue 26): the worker preparing it, the attempt (which fences a late
-- answer from a worker thought gone), and the lease's last heartbeat.  A model
-- whose preparing stopped with its worker is claimed again once the lease is
-- stale; after the last attempt it ends invalid, saying so.
ALTER TABLE models
    ADD COLUMN prepare_worker       text,
    ADD COLUMN prepare_attempt      integer NOT NULL DEFAULT 0 CHECK (prepare_attempt >= 0),
    ADD COLUMN prepare_heartbeat_at timestamptz;

-- Claim: the models still preparing, oldest first.
CREATE INDEX models_preparing_idx ON models (id) WHERE status = 'preparing';

-- A new model wakes the idle workers (they LISTEN on the job queue's channel).
CREATE FUNCTION fb_model_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('fb_jobs', 'model:' || NEW.id);
    RETURN NEW;
END
$$;
CREATE TRIGGER models_notify AFTER INSERT ON models
    FOR EACH ROW EXECUTE FUNCTION fb_model_notify();
