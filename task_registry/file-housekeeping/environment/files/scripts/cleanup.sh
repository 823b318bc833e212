#!/bin/bash
echo cleanup
