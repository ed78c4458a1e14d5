// Package benchkit is what the benchmark programs under scripts/ (bench, searchbench,
// smtpbench) have in common: a seeded generator of realistic mail text, a client of
// inboxd's HTTP API with the API-send measurement, an SMTP load driver, and a fake DNS
// server that vouches for the driver's sender domain. Sharing them keeps the programs'
// figures comparable: the same seed gives the same mail, and the same measurement runs
// the same code in each.
package benchkit
