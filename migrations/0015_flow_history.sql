-- A flow's first rounds live in its own row: the rounds written in the
-- batch that created the row (a JSON array, as a flow_rounds row holds
-- them), or null. Every call is recorded and most are one round, so a
-- row in flow_rounds for each was a second insert, with its index, for
-- nearly every flow; flow_rounds now holds only the rounds of later
-- batches. Flows recorded before this have their rounds all in
-- flow_rounds.
ALTER TABLE flows ADD COLUMN history TEXT;
