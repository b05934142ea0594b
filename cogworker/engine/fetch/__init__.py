"""fetch"""
