-- SQLite's version 18 (approvals): a delivery that answers a question of
-- the item's agent (desired.Delivery.Answer, as JSON; '' for an event),
-- and the question it answers, one answer per question instance.
ALTER TABLE deliveries ADD COLUMN answer TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN answer_to TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX deliveries_by_answer ON deliveries (work_item, answer_to) WHERE answer_to <> '';
