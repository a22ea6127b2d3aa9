// Package redis is a Redis-protocol application for psp.
package redis
