/** Injection token of the PostgreSQL connection URL the app runs on (external or embedded). */
export const DATABASE_URL = Symbol('DATABASE_URL');
