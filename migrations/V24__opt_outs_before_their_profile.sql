-- Why: a one-click unsubscribe is a person's instruction, and it arrives whenever they
-- click: possibly before the client has created the profile the link names, or after the
-- profile was erased and before it is created again. Tied to `recipients` by a foreign
-- key, such an opt-out could not be stored, although the click was answered 200. Without
-- the key, preferences are filed under (owner, recipient id) whether or not the profile
-- exists now, and apply from the moment it does. Erasing a profile deletes its
-- preferences explicitly (`recipients/erase`); setting them through the API still needs
-- the profile (`recipient_preferences/merge`).

ALTER TABLE recipient_preferences DROP CONSTRAINT recipient_preferences_owner_recipient_id_fkey;
