/** Pubsub event telling every replica that keys or access policies changed (their caches start over). */
export const ACCESS_CHANGED = 'access_changed';
