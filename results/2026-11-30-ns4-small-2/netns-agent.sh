#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv22248<HOST>
h=$1; shift
exec ip netns exec "knv22248$h" sh -c "$*"
