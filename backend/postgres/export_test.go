package postgres

// FreeStatements returns the statements of the common cases of acquire and
// release for the tables of schema and prefix, for tests that run them
// directly.
func FreeStatements(schema, prefix string) (acquire, release string) {
	return sqlText(schema, prefix, acquireFreeSQL), sqlText(schema, prefix, releaseFreeSQL)
}
