// Package schema holds the JSON Schemas of the /v1 API, validates requests and responses
// against them, and builds the OpenAPI document served at /openapi.json from the very same
// schemas, so the contract clients read and the checks the server makes cannot drift.
//
// The schemas are JSON files embedded from json/:
//
//	json/defs.json      shared definitions (email, uuid, labels, Message, Triage, ...)
//	json/path.json      one schema per path parameter
//	json/ops/<id>.json  per operation: "query" (GET), "body" (POST, PATCH, DELETE), "response"
//
// Files refer to definitions as {"$ref": "defs.json#/NAME"}; load.go inlines every
// reference, so each schema is self-contained. The keywords are those that JSON Schema
// draft-07 (what gojsonschema validates with) and 2020-12 (what OpenAPI 3.1 clients read)
// read the same way; a test holds them to that list. A string schema's description
// completes the sentence "FIELD: must be ..." of its validation error.
//
// Beyond the schemas, in Go: precheck.go (lengths and canonical base64, before any pattern
// runs over a large value), crossfield.go (limits that span fields, spec section 8),
// duplicate.go (a key repeated within an object, which decoding would hide), and rule.go
// (ValidEmail and ValidLabel, compiled from the same "email" and "label" definitions).
//
// The MCP tool input schemas (API-NOTES section 13) are meant to be composed from the
// same maps: an object of the operation's path parameters (sources.path, all required)
// plus the properties and required list of its query or body schema (contract.query,
// contract.body), with additionalProperties false.
package schema
