-- 0013_model_native: an uploaded model's native form (issue 26), the one file
-- the native engine runs the model from (its graph in the native engine's IR,
-- its weights as float32, a seeded input and PyTorch eager's output for it).
-- The worker that prepares the model makes it and stores it as a blob like
-- the archive (by content, in chunks), in the transaction that ends the
-- preparing.  NULL when the native engine cannot run the model, or the model
-- was prepared before this migration.  The service made it, so it does not
-- count against the owner's quota; it goes with the model.
ALTER TABLE models ADD COLUMN native_blob_id bigint REFERENCES model_blobs (id);
CREATE INDEX models_native_blob_idx ON models (native_blob_id) WHERE native_blob_id IS NOT NULL;
