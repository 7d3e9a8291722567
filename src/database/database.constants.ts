/** Injection token of the PostgreSQL connection URL the app runs on (external or embedded). */
export const DATABASE_URL = Symbol('DATABASE_URL');

/**
 * The SELECT-only Postgres role (made by a migration) that the data tools' READ ONLY transactions
 * switch to, so a statement that tries to write is refused by the database itself.
 */
export const DATA_READER_ROLE = 'data_copilot_reader';
