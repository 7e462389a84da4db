package report

// Count says n with the word that goes with it: "1 segment", "3 segments",
// "0 segments". Every renderer counting things in words goes through it.
func Count(n int, one, many string) string { return plural(n, one, many) }
